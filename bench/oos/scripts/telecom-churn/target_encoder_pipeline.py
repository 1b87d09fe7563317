# idiom: scikit-learn TargetEncoder for the high-cardinality state inside a ColumnTransformer, RandomForest, roc_auc by StratifiedKFold; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, TargetEncoder

df = pd.read_csv("data/train.csv")
df_test = pd.read_csv("data/test.csv")

target = (df["churn"] == "yes").astype(int)
X = df.drop(columns=["id", "churn"])
numeric = X.select_dtypes("number").columns.tolist()

transform = ColumnTransformer([
    ("state", TargetEncoder(target_type="binary", random_state=0), ["state"]),
    ("small_cats", OneHotEncoder(handle_unknown="ignore"), ["area_code", "international_plan", "voice_mail_plan"]),
    ("num", "passthrough", numeric),
])
clf = Pipeline([("transform", transform),
                ("rf", RandomForestClassifier(n_estimators=400, min_samples_leaf=3, random_state=0))])

auc = cross_val_score(clf, X, target, cv=StratifiedKFold(5, shuffle=True, random_state=0), scoring="roc_auc")
print("AUC per fold:", auc.round(4), "mean", auc.mean().round(4))

clf.fit(X, target)
df_test["churn"] = clf.predict_proba(df_test[X.columns])[:, 1]
df_test[["id", "churn"]].to_csv("submission.csv", index=False)
