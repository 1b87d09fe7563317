# idiom: OneHotEncoder(sparse=False) to get a dense array (renamed sparse_output in scikit-learn 1.2, removed in 1.4); intended: crash (TypeError)
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

cat_cols = ["state", "area_code", "international_plan", "voice_mail_plan"]
num_cols = [c for c in train.columns if c not in cat_cols + ["id", "churn"]]

ohe = OneHotEncoder(sparse=False, handle_unknown="ignore")
scaler = StandardScaler()
X = np.hstack([ohe.fit_transform(train[cat_cols]), scaler.fit_transform(train[num_cols])])
X_test = np.hstack([ohe.transform(test[cat_cols]), scaler.transform(test[num_cols])])
y = train["churn"].eq("yes").astype(int)

lr = LogisticRegression(C=0.5, max_iter=2000)
lr.fit(X, y)
pd.DataFrame({"id": test["id"], "churn": lr.predict_proba(X_test)[:, 1]}).to_csv("submission.csv", index=False)
