# idiom: every 1-5 rating one-hot encoded as a category with make_column_transformer, multinomial LogisticRegression with C picked by a dict comprehension over cross_val_score(scoring='neg_log_loss'); intended: valid
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

ratings = ["economic.cond.national", "economic.cond.household", "Blair", "Hague", "Kennedy", "political.knowledge",
           "gender"]
scaled = ["age", "Europe"]


def make_model(c):
    prep = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), ratings),
        (StandardScaler(), scaled),
    )
    return make_pipeline(prep, LogisticRegression(C=c, max_iter=3000))


cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
X, y = train[ratings + scaled], train["vote"]
scores = {c: -cross_val_score(make_model(c), X, y, cv=cv, scoring="neg_log_loss").mean()
          for c in (0.03, 0.1, 0.3, 1.0, 3.0)}
for c, s in scores.items():
    print(f"C={c}: CV log loss {s:.4f}")
best_c = min(scores, key=scores.get)

model = make_model(best_c).fit(X, y)
proba = model.predict_proba(test[ratings + scaled])
sub = pd.DataFrame(proba, columns=model.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv("submission.csv", index=False)
