# idiom: ColumnTransformer (OneHotEncoder + StandardScaler) and class_weight='balanced' LogisticRegression for balanced accuracy; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

TARGET = "released"
CATEGORICAL = ["colour", "sex", "employed", "citizen", "year"]
NUMERIC = ["age", "checks"]


def build_model():
    pre = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL),
        ("num", StandardScaler(), NUMERIC),
    ])
    return Pipeline([("pre", pre), ("clf", LogisticRegression(class_weight="balanced", max_iter=1000))])


def main():
    train = pd.read_csv("data/train.csv")
    test = pd.read_csv("data/test.csv")
    X, y = train[CATEGORICAL + NUMERIC], train[TARGET]

    model = build_model()
    cv_pred = cross_val_predict(model, X, y, cv=5)
    print("CV balanced accuracy:", round(balanced_accuracy_score(y, cv_pred), 4))

    model.fit(X, y)
    out = pd.DataFrame({"id": test["id"], TARGET: model.predict(test[CATEGORICAL + NUMERIC])})
    out.to_csv("submission.csv", index=False)
    print(out[TARGET].value_counts())


if __name__ == "__main__":
    main()
